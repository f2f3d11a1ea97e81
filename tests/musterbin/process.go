package musterbin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Token is one token of a test configuration: its secret, its family and
// its grants.
type Token struct {
	Secret, Family string
	Grants         []string
}

// TokensConfig is the `tokens:` section of a configuration file holding
// tokens (named t0, t1, …, by their SHA-256), for a broker started by a test.
func TokensConfig(tokens ...Token) string {
	var sb strings.Builder
	sb.WriteString("tokens:\n")
	for i, tk := range tokens {
		sum := sha256.Sum256([]byte(tk.Secret))
		fmt.Fprintf(&sb, "  - name: t%d\n    sha256: %s\n    family: %s\n    grants:\n", i, hex.EncodeToString(sum[:]), tk.Family)
		for _, g := range tk.Grants {
			fmt.Fprintf(&sb, "      - %q\n", g)
		}
	}
	return sb.String()
}

// Metric reads one sample of a broker's /metrics at base (the sample's
// name with its labels, as the exposition prints them): -1 when /metrics
// cannot be read, 0 when the sample is absent.
func Metric(base, sample string) float64 {
	v, err := ReadMetric(base, sample)
	switch {
	case errors.Is(err, ErrNoSample):
		return 0
	case err != nil:
		return -1
	}
	return v
}

// ErrNoSample is ReadMetric's error for a sample /metrics does not have.
var ErrNoSample = errors.New("no such sample")

// ReadMetric reads one sample of a broker's /metrics at base, as Metric
// does, but says why when it cannot: /metrics unreadable, the sample
// absent (ErrNoSample) or not a number.
func ReadMetric(base, sample string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(rest, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: %w", sample, ErrNoSample)
}

// LockedBuffer is a bytes.Buffer safe for one writer (a process's output)
// and concurrent readers.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
