package seqboxcli

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
)

// TestUIListenPolicy: only loopback goes without auth; anything else,
// every interface or a host name that may resolve anywhere, needs a token
// or basic auth.
func TestUIListenPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:8080", true},
		{"127.3.2.1:0", true},
		{"localhost:8080", true},
		{"LocalHost:8080", true},
		{"[::1]:8080", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"[2001:db8::1]:8080", false},
		{"example.com:8080", false},
		{"myhost:8080", false},
		{"localhost.example.com:8080", false},
	} {
		_, err := checkListen(tt.addr, false)
		if tt.loopback {
			require.NoError(t, err, tt.addr)
		} else {
			require.ErrorContains(t, err, "not a loopback address", tt.addr)
			require.ErrorContains(t, err, "--token or --basic-auth", tt.addr)
		}
		_, err = checkListen(tt.addr, true)
		require.NoError(t, err, "%s with auth", tt.addr)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "[::1]", ""} {
		_, err := checkListen(bad, true)
		require.Error(t, err, bad)
	}
}

// TestUICommandLine: the listen policy and the auth settings are usage
// errors (exit 2) found before anything is opened or listened on; a
// setting that passes reaches the database (here a file that does not
// exist: exit 1).
func TestUICommandLine(t *testing.T) {
	t.Parallel()
	missing := "sqlite:" + filepath.Join(t.TempDir(), "missing.db")
	const token = "0123456789abcdef"
	for _, tt := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"any interface without auth", nil, []string{"--listen", "0.0.0.0:0"}, ExitUsage, "not a loopback address"},
		{"empty host without auth", nil, []string{"--listen", ":0"}, ExitUsage, "not a loopback address"},
		{"host name without auth", nil, []string{"--listen", "example.com:0"}, ExitUsage, "not a loopback address"},
		{"any interface with a token", nil, []string{"--listen", "0.0.0.0:0", "--token", token}, ExitFailure, "missing.db"},
		{"any interface with basic auth", nil, []string{"--listen", "0.0.0.0:0", "--basic-auth", "a:b"}, ExitFailure, "missing.db"},
		{"token from the environment", map[string]string{EnvUIToken: token}, []string{"--listen", "0.0.0.0:0"}, ExitFailure, "missing.db"},
		{"basic auth from the environment", map[string]string{EnvUIBasicAuth: "a:b"}, []string{"--listen", "[::]:0"}, ExitFailure, "missing.db"},
		{"a flag wins over the environment", map[string]string{EnvUIToken: "short", EnvUIBasicAuth: "x"}, []string{"--basic-auth", "a:b"}, ExitFailure, "missing.db"},
		{"loopback without auth", nil, nil, ExitFailure, "missing.db"},
		{"both flags", nil, []string{"--token", token, "--basic-auth", "a:b"}, ExitUsage, "--token and --basic-auth: give one"},
		{"both in the environment", map[string]string{EnvUIToken: token, EnvUIBasicAuth: "a:b"}, nil, ExitUsage, EnvUIToken + " and " + EnvUIBasicAuth},
		{"short token", nil, []string{"--token", "abc"}, ExitUsage, "--token: want at least 16"},
		{"short token in the environment", map[string]string{EnvUIToken: "abc"}, nil, ExitUsage, EnvUIToken + ": want at least 16"},
		{"token with a plus", nil, []string{"--token", "0123456789abcdef+"}, ExitUsage, `'+' is not allowed`},
		{"empty token", nil, []string{"--token", ""}, ExitUsage, "--token: empty"},
		{"basic auth without a colon", nil, []string{"--basic-auth", "alice"}, ExitUsage, "want USER:PASS"},
		{"basic auth without a password", nil, []string{"--basic-auth", "alice:"}, ExitUsage, "want USER:PASS"},
		{"bad listen", nil, []string{"--listen", "8080"}, ExitUsage, "want host:port"},
		{"stray argument", nil, []string{"extra"}, ExitUsage, `unexpected argument "extra"`},
		{"no --json", nil, []string{"--json"}, ExitUsage, "unknown flag --json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := MainEnv(context.Background(), append([]string{"ui", "--dsn", missing}, tt.args...),
				func(k string) string { return tt.env[k] }, &out, &errOut)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
			require.Contains(t, errOut.String(), tt.stderr)
			require.Empty(t, out.String(), "nothing served")
		})
	}
	var out bytes.Buffer
	require.Equal(t, ExitOK, MainEnv(context.Background(), []string{"help", "ui"}, nil, &out, io.Discard))
	require.Contains(t, out.String(), "usage: seqbox ui --dsn DSN")
	require.Contains(t, out.String(), EnvUIToken)
	out.Reset()
	require.Equal(t, ExitOK, MainEnv(context.Background(), []string{"help"}, nil, &out, io.Discard))
	require.Regexp(t, `\n  ui +serve the operator web UI`, out.String())
}

// whoAmI answers with the identity the middleware established.
func whoAmI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, uiIdentity(r)) })
}

func serveAuth(a *uiAuth, r *http.Request) *http.Response {
	w := httptest.NewRecorder()
	a.wrap(whoAmI()).ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestUIBasicAuth(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	a := &uiAuth{user: "alice", pass: "s3cret:x", log: slog.New(slog.NewTextHandler(&logged, nil))}
	req := func(user, pass string) *http.Request {
		r := httptest.NewRequest("GET", "/queues/q", nil)
		if user != "" || pass != "" {
			r.SetBasicAuth(user, pass)
		}
		return r
	}
	resp := serveAuth(a, req("alice", "s3cret:x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "alice", body(t, resp), "the identity is the user name")
	require.Empty(t, logged.String())

	for _, bad := range [][2]string{{"", ""}, {"alice", "wrong"}, {"bob", "s3cret:x"}, {"alice", "s3cret"}, {"alic", "s3cret:x"}} {
		resp := serveAuth(a, req(bad[0], bad[1]))
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, bad)
		require.Equal(t, `Basic realm="seqbox", charset="UTF-8"`, resp.Header.Get("WWW-Authenticate"), bad)
		require.Contains(t, body(t, resp), "--basic-auth", bad)
	}
	require.Equal(t, 4, strings.Count(logged.String(), "authentication failed"), "wrong credentials are logged, none at all are not:\n%s", logged.String())

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer s3cret:x")
	require.Equal(t, http.StatusUnauthorized, serveAuth(a, r).StatusCode, "basic auth takes no bearer token")
}

func TestUITokenAuth(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-._~"
	a := &uiAuth{token: token, log: slog.New(slog.DiscardHandler)}

	bearer := func(method, target, tok string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	resp := serveAuth(a, bearer("GET", "/", token))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "token", body(t, resp))
	r := httptest.NewRequest("POST", "/queues/q/partitions/0/resume", nil)
	r.Header.Set("Authorization", "bearer "+token)
	require.Equal(t, http.StatusOK, serveAuth(a, r).StatusCode, "the scheme is case-insensitive")
	for _, bad := range []string{"", "0123456789abcdef", token + "x", strings.ToUpper(token)} {
		resp := serveAuth(a, bearer("GET", "/", bad))
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, bad)
		require.Equal(t, `Bearer realm="seqbox"`, resp.Header.Get("WWW-Authenticate"))
	}

	// No credentials: 401, saying how to authenticate.
	resp = serveAuth(a, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	msg := body(t, resp)
	require.Contains(t, msg, "?token=<token>")
	require.Contains(t, msg, "Authorization: Bearer <token>")
	require.NotContains(t, msg, token)

	// ?token= on a GET: a cookie, and the same URL without the token.
	resp = serveAuth(a, httptest.NewRequest("GET", "/queues/orders?state=parked&token="+token+"&x=%2F", nil))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/queues/orders?state=parked&x=%2F", resp.Header.Get("Location"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, uiTokenCookie, c.Name)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.False(t, c.Secure, "plain HTTP")
	require.Equal(t, "/", c.Path)

	// The cookie then lets in GETs and POSTs.
	for _, method := range []string{"GET", "POST"} {
		r := httptest.NewRequest(method, "/queues/orders", nil)
		r.AddCookie(c)
		resp := serveAuth(a, r)
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
		require.Equal(t, "token", body(t, resp))
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: uiTokenCookie, Value: "0123456789abcdef"})
	require.Equal(t, http.StatusUnauthorized, serveAuth(a, r).StatusCode, "wrong cookie")

	// Over TLS the cookie is Secure.
	r = httptest.NewRequest("GET", "/?token="+token, nil)
	r.TLS = &tls.ConnectionState{}
	resp = serveAuth(a, r)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	require.True(t, resp.Cookies()[0].Secure)

	// A wrong ?token= sets nothing; ?token= on a POST is not taken.
	resp = serveAuth(a, httptest.NewRequest("GET", "/?token=0123456789abcdeX", nil))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	resp = serveAuth(a, httptest.NewRequest("POST", "/queues/q/partitions/0/resume?token="+token, nil))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Cookies())
}

func TestUIWithoutToken(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"/?token=T":                      "/",
		"/queues/q?token=T":              "/queues/q",
		"/queues/q?a=1&token=T&b=2":      "/queues/q?a=1&b=2",
		"/queues/q?%74oken=T&a=1":        "/queues/q?a=1",
		"/queues/a%2Fb/?token=T&token=U": "/queues/a%2Fb/",
		"//evil.example/x?token=T":       "/evil.example/x",
		"///evil.example?token=T":        "/evil.example",
	} {
		u, err := url.ParseRequestURI(target)
		require.NoError(t, err)
		require.Equal(t, want, withoutToken(u), target)
	}
	// http.Redirect then leaves it on this host.
	a := &uiAuth{token: "0123456789abcdef", log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("GET", "/", nil)
	r.URL, _ = url.ParseRequestURI("//evil.example/?token=0123456789abcdef")
	loc := serveAuth(a, r).Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//"), loc)
}

func TestUILocalIdentity(t *testing.T) {
	t.Parallel()
	var c uiCLI
	fs := uiFlags(&c)
	require.NoError(t, fs.Parse(nil))
	a, err := c.auth(streams{getenv: func(string) string { return "" }})
	require.NoError(t, err)
	require.False(t, a.required())
	resp := serveAuth(a, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `^local:.+`, body(t, resp))
}

// syncBuffer is a buffer the server's goroutines write while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// lines receives each complete line written.
	lines chan string
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, _ := b.b.Write(p)
	if b.lines != nil {
		for strings.Contains(b.b.String(), "\n") {
			line, _ := b.b.ReadString('\n')
			select {
			case b.lines <- line:
			default:
			}
		}
	}
	return n, nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// uiDB is a migrated SQLite database with a queue "orders".
func uiDB(ctx context.Context, t *testing.T) string {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ui.db")
	db, err := OpenDB(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	ob, err := seqbox.New(db).Migrate(true).Logger(slog.New(slog.DiscardHandler)).
		Queue("orders", 4, nil).ProducerOnly().Start(ctx)
	require.NoError(t, err)
	require.NoError(t, ob.Stop(ctx))
	return dsn
}

// startUI runs seqbox ui with args until the returned stop is called, and
// returns the URL it printed; stop returns the exit code and stderr.
func startUI(ctx context.Context, t *testing.T, env map[string]string, mode string, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	out := &syncBuffer{lines: make(chan string, 4)}
	errOut := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- MainEnv(sctx, append([]string{"ui", "--listen", "127.0.0.1:0"}, args...),
			func(k string) string { return env[k] }, out, errOut)
	}()
	stop = func() (int, string) {
		cancel()
		select {
		case code := <-done:
			return code, errOut.String()
		case <-ctx.Done():
			t.Fatalf("seqbox ui did not stop\nstderr:\n%s", errOut.String())
		}
		return 0, ""
	}
	var line string
	select {
	case line = <-out.lines:
	case code := <-done:
		t.Fatalf("seqbox ui exited %d before serving\nstderr:\n%s", code, errOut.String())
	case <-ctx.Done():
		t.Fatalf("seqbox ui did not start\nstderr:\n%s", errOut.String())
	}
	m := regexp.MustCompile(`^seqbox ui: serving (http://127\.0\.0\.1:[1-9]\d*/) \(` + mode + `\)\n$`).FindStringSubmatch(line)
	require.NotNil(t, m, "the line printed on start: %q", line)
	return m[1], stop
}

// TestUIServesToken: seqbox ui read-only with a token from the
// environment; a browser signs in with ?token= once and then uses the
// cookie; a read-only action is refused and logged as by "token"; the
// command ends cleanly when its context does.
func TestUIServesToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := uiDB(ctx, t)
	const token = "0123456789abcdef0123"
	base, stop := startUI(ctx, t, map[string]string{EnvDSN: dsn, EnvUIToken: token}, "read-only", "--read-only")

	resp, err := http.Get(base)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NoError(t, resp.Body.Close())

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	resp, err = browser.Get(base + "?token=" + token)
	require.NoError(t, err)
	page := body(t, resp)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, base, resp.Request.URL.String(), "redirected to the URL without the token")
	require.Contains(t, page, "orders", "the overview lists the queue")
	resp, err = browser.Get(base + "queues/orders")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, "the cookie lets the browser in")

	req, err := http.NewRequestWithContext(ctx, "POST", base+"queues/orders/partitions/0/resume", strings.NewReader("csrf=x"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "read-only")

	code, stderr := stop()
	require.Equal(t, ExitOK, code, stderr)
	require.Regexp(t, `msg="seqbox ui action" who=token action=resume queue=orders partition=0 outcome="refused: read-only"`, stderr)
	_, err = http.Get(base)
	require.Error(t, err, "no longer serving")
}

// TestUIServesBasicAuth: read-write with basic auth; the action log names
// the user.
func TestUIServesBasicAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := uiDB(ctx, t)
	base, stop := startUI(ctx, t, nil, "read-write", "--dsn", dsn, "--basic-auth", "alice:pw")

	req, err := http.NewRequestWithContext(ctx, "GET", base+"queues/orders/partitions/1", nil)
	require.NoError(t, err)
	req.SetBasicAuth("alice", "pw")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page := body(t, resp)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, page)

	req, err = http.NewRequestWithContext(ctx, "POST", base+"queues/orders/partitions/1/retry", strings.NewReader("csrf=forged"))
	require.NoError(t, err)
	req.SetBasicAuth("alice", "pw")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a forged CSRF token")

	code, stderr := stop()
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stderr, `who=alice action=retry queue=orders partition=1 outcome="refused: bad CSRF token"`)
}
