package sim

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in topology files as a Go duration
// string ("2s", "500ms"). A bare number is taken as seconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string ("1.5s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "2s", "500ms" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as 2s or 500ms", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"2s\" or a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}
