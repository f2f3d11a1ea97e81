package core

import (
	"context"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/musterhq/muster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeInventories() // benchmark fixtures live for the whole binary
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The actor expires sessions on its own tick, with real timers inside a
// synctest bubble: no sleeping in wall time.
func TestBrokerExpiresOnTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, SystemClock{}, nil)
		defer b.Close()
		ctx := context.Background()
		if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + TickInterval)
		synctest.Wait()
		st, err := b.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sessions != 0 || st.SessionsExpired != 1 {
			t.Fatalf("stats after ttl = %+v", st)
		}
	})
}

func TestBrokerClosed(t *testing.T) {
	b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, nil, nil)
	b.Close()
	b.Close()
	_, err := b.CreateSession(context.Background(), SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Second})
	if muster.ErrorCode(err) != muster.CodeUnavailable {
		t.Fatalf("after close: %v", err)
	}
}
