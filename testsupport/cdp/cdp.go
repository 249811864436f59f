// Package cdp drives headless Chromium over the DevTools protocol, for
// memrec's browser tests and benchmarks. It speaks the protocol on a pipe
// (--remote-debugging-pipe: JSON messages each ended by a NUL byte,
// commands written to the browser's fd 3, answers and events read from its
// fd 4), so it needs no WebSocket and no port.
//
// A page is driven in real time: Navigate, then WaitFor an expression to
// become true and Eval what the test wants to read. Errors the page throws
// or logs (uncaught exceptions, console.error, failed loads) are kept in
// Page.Errors.
package cdp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Find returns the path of a Chromium on PATH (chromium, chromium-browser
// or google-chrome, the first found), or "" if there is none.
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Need is Find for a test: without a Chromium it fails where CI is set
// (.ci/run installs one) and skips elsewhere.
func Need(t testing.TB) string {
	t.Helper()
	p := Find()
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium on the CI machine: .ci/run installs it")
		}
		t.Skip("no Chromium here (apt-get install chromium)")
	}
	return p
}

// Browser is one headless Chromium process.
type Browser struct {
	cmd *exec.Cmd
	in  *os.File // the browser's fd 3: our commands
	out *os.File // the browser's fd 4: its answers and events

	mu      sync.Mutex
	next    int
	waiting map[int]chan reply
	pages   map[string]*Page // by session
	done    chan struct{}
	readErr error
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type message struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	reply
}

// Start runs the browser at path headless, with a fresh profile in
// profileDir and the extra flags given.
func Start(path, profileDir string, flags ...string) (*Browser, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--user-data-dir=" + profileDir, "--remote-debugging-pipe"}, flags...)
	cmd := exec.Command(path, append(args, "about:blank")...)
	cmd.ExtraFiles = []*os.File{inR, outW} // fd 3 and fd 4
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	inR.Close()
	outW.Close()
	b := &Browser{cmd: cmd, in: inW, out: outR, waiting: map[int]chan reply{}, pages: map[string]*Page{}, done: make(chan struct{})}
	go b.read()
	return b, nil
}

// read hands each answer to its caller and each event to its page.
func (b *Browser) read() {
	r := bufio.NewReaderSize(b.out, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, c := range b.waiting {
				close(c)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			close(b.done)
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if c, ok := b.waiting[m.ID]; ok {
				c <- m.reply
				delete(b.waiting, m.ID)
			}
		} else if p := b.pages[m.SessionID]; p != nil {
			p.event(m.Method, m.Params)
		}
		b.mu.Unlock()
	}
}

// call sends one command (to a page's session, or to the browser with
// session "") and decodes its result into result (nil: not wanted).
func (b *Browser) call(session, method string, params, result any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return fmt.Errorf("%s: the browser is gone (%v)", method, b.readErr)
	}
	b.next++
	id := b.next
	c := make(chan reply, 1)
	b.waiting[id] = c
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err == nil {
		_, err = b.in.Write(append(data, 0))
	}
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case rep, ok := <-c:
		if !ok {
			return fmt.Errorf("%s: the browser closed the pipe", method)
		}
		if rep.Error != nil {
			return fmt.Errorf("%s: %s", method, rep.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(rep.Result, result)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer in 60 s", method)
	}
}

// Close ends the browser and waits for it.
func (b *Browser) Close() error {
	b.call("", "Browser.close", nil, nil)
	b.in.Close()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
	}
	b.out.Close()
	err := b.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // it was told to close
	}
	return err
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string

	mu     sync.Mutex
	errors []string
}

// NewPage opens a blank tab and attaches to it, with the runtime's and the
// log's events on.
func (b *Browser) NewPage() (*Page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: attached.SessionID}
	b.mu.Lock()
	b.pages[p.session] = p
	b.mu.Unlock()
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if err := b.call(p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// event keeps what the page reports as an error. The browser's lock is
// held.
func (p *Page) event(method string, params json.RawMessage) {
	var text string
	switch method {
	case "Runtime.exceptionThrown":
		var e struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(params, &e)
		text = strings.TrimSpace(e.Details.Text + " " + e.Details.Exception.Description)
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(params, &e)
		if e.Type != "error" && e.Type != "assert" {
			return
		}
		var parts []string
		for _, a := range e.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, fmt.Sprint(a.Value))
			}
		}
		text = "console." + e.Type + ": " + strings.Join(parts, " ")
	case "Log.entryAdded":
		var e struct {
			Entry struct {
				Level string `json:"level"`
				Text  string `json:"text"`
				URL   string `json:"url"`
			} `json:"entry"`
		}
		json.Unmarshal(params, &e)
		if e.Entry.Level != "error" {
			return
		}
		text = strings.TrimSpace(e.Entry.Text + " " + e.Entry.URL)
	default:
		return
	}
	p.mu.Lock()
	p.errors = append(p.errors, text)
	p.mu.Unlock()
}

// Errors returns what the page threw or logged as an error so far.
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// Navigate loads url in the page.
func (p *Page) Navigate(url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(p.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate %s: %s", url, r.ErrorText)
	}
	return nil
}

// Eval evaluates a JavaScript expression in the page (awaiting it if it
// is a promise) and decodes its value, which must be JSON, into out (nil:
// not wanted).
func (p *Page) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.Exception; e != nil {
		return fmt.Errorf("evaluate %q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// WaitFor evaluates expr every 10 ms until it is true, for at most
// timeout.
func (p *Page) WaitFor(expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if err := p.Eval("!!("+expr+")", &ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still false after %v; page errors: %v", expr, timeout, p.Errors())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
