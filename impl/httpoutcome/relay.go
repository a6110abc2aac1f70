package httpoutcome

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// hopByHop are the headers a proxy does not relay (RFC 9110 section 7.6.1),
// with Content-Length handled by the server.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// Relay writes resp to w: its headers (without the hop-by-hop ones), its
// status, then its body, flushing after every read so a server-sent-event
// stream reaches the client token by token. It closes resp's body exactly
// once on every path, so the release given to Do runs then: EndComplete when
// the body was relayed whole (Relay returns nil), EndCut or EndTimedOut or
// EndCancelled with the read error, and EndClosed, with the write error as
// End.Err, when a write to the downstream client failed before the body's
// end (Relay returns that error; a body already read whole stays
// EndComplete: End describes the exchange with the worker).
// When Relay fails after it wrote the headers (the worker's stream was
// cut, or the client left), the handler must abort the response
// (panic(http.ErrAbortHandler), as httputil.ReverseProxy does; router.Proxy
// does it): if it returns, the server ends a chunked response with its
// terminating chunk, and the client takes the truncated answer for a
// complete one.
// Trailers are not relayed. A status outside 100..999, which
// http.ResponseWriter cannot write, is an error before anything is written.
func Relay(w http.ResponseWriter, resp *Response) error {
	if resp == nil || resp.Response == nil || resp.b == nil {
		return invalid("Relay of a nil Response")
	}
	if w == nil {
		resp.b.closeWith(invalid("Relay to a nil ResponseWriter"))
		return invalid("Relay to a nil ResponseWriter")
	}
	if resp.StatusCode < 100 || resp.StatusCode > 999 {
		err := fmt.Errorf("httpoutcome: cannot relay status %d", resp.StatusCode)
		resp.b.closeWith(err)
		return err
	}
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append([]string(nil), vs...)
	}
	for _, f := range resp.Header.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(textproto.TrimString(name))
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	flush := func() error {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	if err := flush(); err != nil {
		resp.b.closeWith(err)
		return err
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.b.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				resp.b.closeWith(err)
				return err
			}
			if err := flush(); err != nil {
				resp.b.closeWith(err)
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
