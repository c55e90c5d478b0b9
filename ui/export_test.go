package ui

import (
	"fmt"
	"time"
)

// WithChartWindow sets how far back the overview's charts reach, instead
// of the last hour (or 3,600 intervals). For TestScreenshots only: its
// scene lasts seconds, and an hour-wide chart would draw it as a sliver.
func WithChartWindow(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("seqbox/ui: WithChartWindow: %v is not positive", d)
		}
		c.chartWindow = d
		return nil
	}
}
