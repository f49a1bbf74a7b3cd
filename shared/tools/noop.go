package tools

import (
	"context"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools/noop"
)

// runNoop is the noop tool (shared/tools/noop, which the what-if computes
// with too).
func (*Registry) runNoop(_ context.Context, it pipeline.Item) toolresult.Envelope {
	return noop.Run(it.Config)
}
