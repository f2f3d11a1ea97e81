package musterbin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
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
