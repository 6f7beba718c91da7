package doctor

import (
	"context"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/internal/matrixlink"
)

// The doctor's tests check Matrix as latch-matrix's doctor does
// (cmd/latch-matrix links the check the same way).
func init() {
	MatrixCheck = func(ctx context.Context, m config.MatrixConfig) (MatrixReport, error) {
		rep, err := matrixlink.Check(ctx, m)
		return MatrixReport(rep), err
	}
}
