package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/layerprobe/layerprobe/api"
)

// Source is what the API reads and triggers; the agent implements it.
// Methods are called concurrently from request goroutines. ctx ends with
// the request.
//
// Errors that wrap ErrNotFound, ErrBusy or ErrNotReady become 404, 409 and
// 503; any other error is logged and answered 500 without its text, which
// may hold host paths.
type Source interface {
	// Overhead returns the latest overhead of every engine.
	Overhead(ctx context.Context) (api.OverheadResponse, error)
	// Cycles returns the cycles matching q, newest first, at most q.Limit.
	Cycles(ctx context.Context, q CycleQuery) ([]api.Cycle, error)
	// Cycle returns one cycle with its raw figures, or ErrNotFound.
	Cycle(ctx context.Context, id int64) (api.CycleDetail, error)
	// Engines returns every configured engine.
	Engines(ctx context.Context) ([]api.Engine, error)
	// Containers returns every engine's last layer-write advisor pass,
	// containers ranked. Like the triggers it takes nothing from the
	// client: the handler filters the answer.
	Containers(ctx context.Context) (api.ContainersResponse, error)
	// TriggerCycle starts one cycle of every engine now and returns the
	// engines' names promptly, without waiting for the cycle (triggers are
	// serialized around it). The cycle must not be bound to ctx, which
	// ends with the HTTP request. It returns ErrBusy while a cycle runs. It deliberately takes no parameters: the profile,
	// targets and paths are the agent's configuration, never the client's.
	// The answer names the cycles started, recorded as running already
	// (the handler fills in Status); a BusyError carries the running
	// cycle's id.
	TriggerCycle(ctx context.Context) (api.TriggerResponse, error)
	// TriggerColdCycle is TriggerCycle for one cold cycle (a fresh
	// container per round, and copy-up). Like TriggerCycle it takes
	// nothing from the client: the handler chooses between the two by a
	// validated enum.
	TriggerColdCycle(ctx context.Context) (api.TriggerResponse, error)
	// Ready returns nil once the agent can answer (its first engine check
	// is done); otherwise an error whose text says why not.
	Ready() error
}

// BusyError is ErrBusy with the running cycle's id (0: not recorded yet,
// a cycle being prepared).
type BusyError struct{ CycleID int64 }

func (e *BusyError) Error() string {
	if e.CycleID == 0 {
		return ErrBusy.Error()
	}
	return fmt.Sprintf("%s: cycle %d", ErrBusy, e.CycleID)
}

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// CycleQuery selects cycles for GET /api/v1/cycles. Every field has been
// validated before a Source sees it.
type CycleQuery struct {
	Limit  int       // 1..MaxLimit
	Since  time.Time // zero: no lower bound; else cycles started at or after it
	Engine string    // "": every engine; else one configured engine name
}

// Sentinel errors a Source returns (wrapped or not) to choose the status.
var (
	ErrNotFound = errors.New("not found")                      // 404 not_found
	ErrBusy     = errors.New("a measurement cycle is running") // 409 conflict
	ErrNotReady = errors.New("not ready")                      // 503 not_ready
)
