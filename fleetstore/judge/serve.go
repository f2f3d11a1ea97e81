package judge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/fleetstore"
)

// Serve is the worker's loop: it reads the schema frame, compiles it and
// answers, then judges one spec frame after the other until in ends. A
// refusal (the schema does not compile, a budget ran out) is answered and
// ends the loop with a nil error; a broken wire ends it with that error.
func Serve(in io.Reader, out io.Writer) error {
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	buf, err := readFrame(r, nil)
	if err != nil {
		return err
	}
	s, err := fleetstore.CompileSchema(buf)
	if err != nil {
		return refuse(w, err)
	}
	if err := answer(w, statusOK); err != nil {
		return err
	}
	ctx := context.Background()
	s.Budget(ctx)
	for {
		if buf, err = readFrame(r, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		ok, err := s.Judge(ctx, buf)
		if err != nil {
			return refuse(w, err)
		}
		st := statusInvalid
		if ok {
			st = statusValid
		}
		if err := answer(w, st); err != nil {
			return err
		}
	}
}

func answer(w *bufio.Writer, st byte) error {
	if err := w.WriteByte(st); err != nil {
		return err
	}
	return w.Flush()
}

// refuse answers err as statusRefused with its code and message; an error
// without a code is sent as CodeInternal.
func refuse(w *bufio.Writer, err error) error {
	var me *muster.Error
	if !errors.As(err, &me) {
		me = muster.Errorf(muster.CodeInternal, "the sweep worker failed")
	}
	if err := w.WriteByte(statusRefused); err != nil {
		return err
	}
	if err := writeFrame(w, []byte(string(me.Code)+"\n"+me.Message)); err != nil {
		return err
	}
	return w.Flush()
}

// parseRefusal is refuse's frame read back.
func parseRefusal(b []byte) *muster.Error {
	code, msg, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return muster.Errorf(muster.CodeInternal, "the sweep worker answered a malformed refusal")
	}
	return &muster.Error{Code: muster.Code(code), Message: string(msg)}
}
