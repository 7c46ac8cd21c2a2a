// Package httpapi serves layerprobe's HTTP surface: the REST API under
// /api/v1 (described by api/openapi.yaml), /healthz, /readyz, /metrics and a
// landing page, routed by gin. It is the only package that imports gin.
//
// It decides what a request may ask for and how every failure looks on the
// wire, and nothing else: data comes from a Source the agent implements.
// Every error is {"error":{"code":...,"message":...}} with a 4xx status when
// the request was at fault; bad input never produces a 5xx.
//
// The one mutating route, POST /api/v1/cycles, starts a measurement cycle on
// a process that holds the Docker socket (root-equivalent). It therefore
// needs a bearer token (off unless --api-token-file is given), is rate
// limited, and takes no parameter but the mode enum (steady or cold):
// nothing a client sends can reach fio options, file paths or container
// configuration.
package httpapi
