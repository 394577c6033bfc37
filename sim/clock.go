package sim

import (
	"time"

	"github.com/vpcnet/vpcnet/clock"
)

// ManualClock is the shared manual clock (clock.Manual): pass its Now and
// AfterFunc in Options to drive a Cloud with it, and the same clock to the
// agent, so the emulator and the agent see one time.
type ManualClock = clock.Manual

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock { return clock.NewManual(start) }
