package app

import (
	"time"

	"github.com/musterhq/muster/handlers"
)

// LimitsConfig is the `limits:` section of the configuration file. Every
// field is optional; a missing one takes its default.
//
//	limits:
//	  body_read_timeout: 5s   # a request body must arrive within this
type LimitsConfig struct {
	BodyReadTimeout time.Duration `yaml:"body_read_timeout" validate:"omitempty,min=100ms,max=10m"`
}

// bodyReadTimeout is the configured body read deadline or its default.
func (l *LimitsConfig) bodyReadTimeout() time.Duration {
	if l.BodyReadTimeout > 0 {
		return l.BodyReadTimeout
	}
	return handlers.DefaultBodyReadTimeout
}
