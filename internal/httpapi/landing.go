package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// landingPage is the answer of GET /: where a person who opens the agent's
// address in a browser finds the routes (Prometheus exporter convention).
// It is static: no request data is ever reflected into HTML.
const landingPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>layerprobe agent</title></head>
<body>
<h1>layerprobe agent</h1>
<p>How much slower storage is in Docker containers than on this host, measured continuously with fio.</p>
<ul>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
<li><a href="/api/v1/overhead">/api/v1/overhead</a>: latest overhead per engine, target, workload and metric</li>
<li><a href="/api/v1/cycles">/api/v1/cycles</a>: measurement history (<code>?limit=&amp;since=&amp;engine=</code>)</li>
<li><a href="/api/v1/engines">/api/v1/engines</a>: configured engines</li>
<li><a href="/api/v1/containers">/api/v1/containers</a>: which running containers write into their writable layer, and advice (<code>?engine=</code>)</li>
<li><a href="/api/v1/openapi.yaml">/api/v1/openapi.yaml</a>: OpenAPI description of the REST API</li>
<li><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a>: liveness and readiness</li>
</ul>
<p><code>POST /api/v1/cycles</code> starts a cycle now; it needs the bearer token of <code>--api-token-file</code>.</p>
</body>
</html>
`

func landing(c *gin.Context) {
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(landingPage))
}
