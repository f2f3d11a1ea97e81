package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/musterhq/muster"
)

// Cursor is the position of a LIST page inside one snapshot, bound to the
// family, the selector, the epoch and the snapshot that produced it.
type Cursor struct {
	Epoch    string
	Family   Family
	Selector string
	Snapshot SnapshotID
	After    string // the last key the previous page examined
}

// CursorCodec signs and checks cursors. Each epoch has its own key, derived
// from a master secret that outlives the process (it lives in the data
// directory), so a cursor of an earlier epoch can still be told apart from
// a forged one.
type CursorCodec struct {
	master []byte
	epoch  string
}

// MaxCursorLen bounds the text of a cursor: unpadded base64url
// ([A-Za-z0-9_-]) of at most this many characters. The longest cursor the
// codec issues (a selector-long position) stays well below it.
const MaxCursorLen = 1024

const (
	cursorVersion = 1
	cursorMACLen  = 16
	digestLen     = 16
)

// NewCursorCodec returns the codec of epoch under master.
func NewCursorCodec(master []byte, epoch string) *CursorCodec {
	return &CursorCodec{master: master, epoch: epoch}
}

func epochKey(master []byte, epoch string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("muster cursor key\x00"))
	m.Write([]byte(epoch))
	return m.Sum(nil)
}

func digest(kind, s string) []byte {
	h := sha256.Sum256([]byte(kind + "\x00" + s))
	return h[:digestLen]
}

// Encode returns the opaque base64url form of c:
// version | epoch | H(family) | H(selector) | snapshot | after | MAC.
func (k *CursorCodec) Encode(c Cursor) string {
	b := make([]byte, 0, 64+len(c.Epoch)+len(c.After))
	b = append(b, cursorVersion)
	b = appendString(b, c.Epoch)
	b = append(b, digest("family", string(c.Family))...)
	b = append(b, digest("selector", c.Selector)...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Snapshot))
	b = appendString(b, c.After)
	m := hmac.New(sha256.New, epochKey(k.master, c.Epoch))
	m.Write(b)
	b = append(b, m.Sum(nil)[:cursorMACLen]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var (
	errCursorInvalid = muster.Errorf(muster.CodeInvalidCursor, "the cursor is malformed or was not issued for this request")
	errCursorEpoch   = muster.Errorf(muster.CodeEpochChanged, "the cursor belongs to an earlier broker lifetime: start again from the first page")
)

// Decode checks s, in this order: malformed or forged → invalid_cursor;
// another epoch → epoch_changed; another family or selector →
// invalid_cursor. It returns the snapshot id and position; whether the
// snapshot still exists is the registry's question (cursor_expired).
func (k *CursorCodec) Decode(s string, family Family, selector string) (Cursor, error) {
	if len(s) > MaxCursorLen {
		return Cursor{}, errCursorInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 1+cursorMACLen || raw[0] != cursorVersion {
		return Cursor{}, errCursorInvalid
	}
	body, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	p := body[1:]
	var c Cursor
	var ok bool
	if c.Epoch, p, ok = readString(p); !ok || len(p) < 2*digestLen+8 {
		return Cursor{}, errCursorInvalid
	}
	fam, sel := p[:digestLen], p[digestLen:2*digestLen]
	c.Snapshot = SnapshotID(binary.BigEndian.Uint64(p[2*digestLen:]))
	if c.After, p, ok = readString(p[2*digestLen+8:]); !ok || len(p) != 0 {
		return Cursor{}, errCursorInvalid
	}
	m := hmac.New(sha256.New, epochKey(k.master, c.Epoch))
	m.Write(body)
	if !hmac.Equal(mac, m.Sum(nil)[:cursorMACLen]) {
		return Cursor{}, errCursorInvalid
	}
	if c.Epoch != k.epoch {
		return Cursor{}, errCursorEpoch
	}
	if !hmac.Equal(fam, digest("family", string(family))) || !hmac.Equal(sel, digest("selector", selector)) {
		return Cursor{}, errCursorInvalid
	}
	c.Family, c.Selector = family, selector
	return c, nil
}

func readString(p []byte) (string, []byte, bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) || n > 1024 {
		return "", nil, false
	}
	return string(p[w : w+int(n)]), p[w+int(n):], true
}
