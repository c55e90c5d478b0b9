package seqboxcli

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/ui"
)

// The environment variables seqbox ui reads its secret from when neither
// --token nor --basic-auth is given: a flag's value is visible to every
// user of the machine in ps, the environment is not.
const (
	EnvUIToken     = "SEQBOX_UI_TOKEN"
	EnvUIBasicAuth = "SEQBOX_UI_BASIC_AUTH"
)

const (
	uiDefaultListen = "127.0.0.1:8080"
	// uiTokenCookie holds the token once a browser has shown it in ?token=.
	uiTokenCookie = "seqbox_ui_token"
	// uiMinToken is the shortest token accepted: 16 random characters
	// (openssl rand -hex 16 gives 32) are beyond guessing over HTTP.
	uiMinToken = 16
	// uiShutdownGrace is how long requests in flight get to finish once
	// the command is interrupted.
	uiShutdownGrace = 10 * time.Second
)

type uiCLI struct {
	dbFlags
	listen    string
	readOnly  bool
	token     string
	basicAuth string
}

func uiFlags(c *uiCLI) *flag.FlagSet {
	fs := flag.NewFlagSet("seqbox ui", flag.ContinueOnError)
	c.registerDB(fs)
	fs.StringVar(&c.listen, "listen", uiDefaultListen, "host:port to serve on; any address but loopback needs --token or --basic-auth")
	fs.BoolVar(&c.readOnly, "read-only", false, "hide every action and refuse their POSTs")
	fs.StringVar(&c.token, "token", "", "require this token: 16 or more of A-Z a-z 0-9 - . _ ~ (default $"+EnvUIToken+")")
	fs.StringVar(&c.basicAuth, "basic-auth", "", "require HTTP basic auth with this USER:PASS (default $"+EnvUIBasicAuth+")")
	return fs
}

func uiUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seqbox ui --dsn DSN [--prefix P] [--listen 127.0.0.1:8080] [--read-only] [--token T | --basic-auth USER:PASS]")
	fmt.Fprintln(w, "\nServes the operator web UI (package ui) until interrupted (Ctrl-C or SIGTERM; requests in")
	fmt.Fprintln(w, "flight may finish). It listens on loopback by default; any other address (0.0.0.0, ::, a host")
	fmt.Fprintln(w, "name, an outside IP) needs --token or --basic-auth, and plain HTTP crosses the network in clear,")
	fmt.Fprintln(w, "so put a TLS proxy in front. --read-only hides every action and opens a SQLite file read-only.")
	fmt.Fprintln(w, "Each action is logged on stderr with who did it: the basic-auth user, \"token\", or")
	fmt.Fprintln(w, "\"local:<os user>\" without auth.")
	fmt.Fprintln(w, "\nWith --token a browser opens the printed URL with ?token=T once: the token is kept in a cookie")
	fmt.Fprintln(w, "(HttpOnly, SameSite=Strict) and dropped from the address. Scripts send Authorization: Bearer T.")
	fmt.Fprintln(w, "\nSecrets are best given in the environment, which ps does not show (a flag wins over both):")
	fmt.Fprintln(w, "  "+EnvUIToken+"       the token, as --token")
	fmt.Fprintln(w, "  "+EnvUIBasicAuth+"  USER:PASS, as --basic-auth")
	fmt.Fprintln(w)
	fs := uiFlags(&uiCLI{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runUI(ctx context.Context, s streams, args []string) int {
	var c uiCLI
	fs := uiFlags(&c)
	if code, ok := noArgs(s, fs, "ui", uiUsage, args); !ok {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(s.stderr, "seqbox ui: %v\n", err)
		return ExitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(s.stderr, "seqbox ui: %v\n", err)
		return ExitFailure
	}
	auth, err := c.auth(s)
	if err != nil {
		return usageErr(err)
	}
	host, err := checkListen(c.listen, auth.required())
	if err != nil {
		return usageErr(err)
	}
	acc := accessWrite
	if c.readOnly {
		acc = accessRead
	}
	ss, code := c.open(ctx, s, fs.Name(), acc)
	if ss == nil {
		return code
	}
	defer ss.close()
	a, err := admin(ctx, ss.db, ss.prefix)
	if err != nil {
		return fail(err)
	}
	// Read once now, so that a wrong DSN or prefix shows here and not in
	// the browser.
	if _, err := a.Stats(ctx); err != nil {
		fmt.Fprintf(s.stderr, "seqbox ui: %v\n%s", err, schemaHint)
		return ExitFailure
	}
	log := slog.New(slog.NewTextHandler(s.stderr, nil))
	auth.log = log
	opts := []ui.Option{ui.WithLogger(log), ui.WithIdentity(uiIdentity)}
	mode := "read-write"
	if c.readOnly {
		opts = append(opts, ui.ReadOnly())
		mode = "read-only"
	}
	h, err := ui.New(a, opts...)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.listen)
	if err != nil {
		return fail(err)
	}
	loopback := isLoopbackAddr(ln.Addr())
	if !loopback && !auth.required() {
		// "localhost" passed checkListen; it resolved elsewhere.
		_ = ln.Close()
		return usageErr(fmt.Errorf("--listen %s bound %s, not a loopback address: give --token or --basic-auth", c.listen, ln.Addr()))
	}
	if !loopback {
		log.Warn("seqbox ui: serving plain HTTP beyond loopback: put a TLS proxy in front, or the credentials cross the network in clear",
			"addr", ln.Addr().String())
	}
	srv := &http.Server{
		Handler:           auth.wrap(h),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Long enough for a bulk action by filter; it only cuts off a
		// client that stops reading.
		WriteTimeout:   5 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(s.stdout, "seqbox ui: serving %s (%s)\n", uiURL(host, ln.Addr()), mode)
	if err := serve(ctx, srv, ln); err != nil {
		return fail(err)
	}
	return ExitOK
}

// serve runs srv on ln until ctx ends, then shuts it down, letting
// requests in flight finish for up to uiShutdownGrace.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uiShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("shutdown: requests still running after %v: %w", uiShutdownGrace, err)
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("serve: %w", serr)
	}
	return err
}

// checkListen checks --listen and returns its host. Only a loopback
// address ("localhost", 127.0.0.0/8, ::1) may go without auth: "", 0.0.0.0
// and :: listen on every interface, and a host name may resolve anywhere.
func checkListen(addr string, authed bool) (host string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: want host:port, e.g. %s", addr, uiDefaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--listen %q: want a port number (0 picks a free one), got %q", addr, port)
	}
	if !authed && !isLoopbackHost(host) {
		return "", fmt.Errorf("--listen %s is not a loopback address, so anyone who reaches it could act on the outbox: "+
			"give --token or --basic-auth (or %s / %s), or listen on 127.0.0.1", addr, EnvUIToken, EnvUIBasicAuth)
	}
	return host, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isLoopbackAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// uiURL is the URL to print for a server bound at bound, named as --listen
// named it (so "localhost" stays localhost); a listen on every interface
// is named by the machine's host name.
func uiURL(host string, bound net.Addr) string {
	boundHost, port, _ := net.SplitHostPort(bound.String())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = boundHost
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// uiAuth is how seqbox ui lets a request in: by token, by basic auth, or
// (on loopback only) as the local user.
type uiAuth struct {
	token      string // "" unless by token
	user, pass string // user "" unless by basic auth
	local      string // the identity without auth
	log        *slog.Logger
}

func (a *uiAuth) required() bool { return a.token != "" || a.user != "" }

// auth reads --token and --basic-auth, or when neither flag is given
// their environment variables, and checks them.
func (c *uiCLI) auth(s streams) (*uiAuth, error) {
	given := map[string]bool{}
	c.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	token, basic := c.token, c.basicAuth
	tokenFrom, basicFrom := "--token", "--basic-auth"
	if !given["token"] && !given["basic-auth"] && s.getenv != nil {
		token, basic = s.getenv(EnvUIToken), s.getenv(EnvUIBasicAuth)
		tokenFrom, basicFrom = EnvUIToken, EnvUIBasicAuth
	}
	a := &uiAuth{log: slog.New(slog.DiscardHandler)}
	switch {
	case given["token"] && token == "":
		return nil, errors.New("--token: empty")
	case given["basic-auth"] && basic == "":
		return nil, errors.New("--basic-auth: empty")
	case token != "" && basic != "":
		return nil, fmt.Errorf("%s and %s: give one of them", tokenFrom, basicFrom)
	case token != "":
		if err := checkToken(token); err != nil {
			return nil, fmt.Errorf("%s: %w", tokenFrom, err)
		}
		a.token = token
	case basic != "":
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return nil, fmt.Errorf("%s: want USER:PASS, both not empty", basicFrom)
		}
		a.user, a.pass = user, pass
	default:
		a.local = "local:" + osUser(s)
	}
	return a, nil
}

// checkToken: long enough not to be guessed, and only characters that
// pass unchanged through a URL's query (a '+' would become a space) and a
// cookie.
func checkToken(t string) error {
	if len(t) < uiMinToken {
		return fmt.Errorf("want at least %d characters, got %d (e.g. openssl rand -hex 16)", uiMinToken, len(t))
	}
	for _, r := range t {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~", r)) {
			return fmt.Errorf("%q is not allowed: use A-Z a-z 0-9 - . _ ~ (e.g. openssl rand -hex 16)", r)
		}
	}
	return nil
}

// osUser names the user running the command, for the action log.
func osUser(s streams) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if s.getenv != nil {
		if name := s.getenv("USER"); name != "" {
			return name
		}
	}
	return "unknown"
}

// identityKey is the request context key of who the middleware let in.
type identityKey struct{}

// uiIdentity is the identity uiAuth.wrap put in the request's context,
// for the action log (ui.WithIdentity).
func uiIdentity(r *http.Request) string {
	if who, ok := r.Context().Value(identityKey{}).(string); ok {
		return who
	}
	return "anonymous"
}

// wrap lets through only the requests a passes, with who they are in
// their context.
func (a *uiAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := a.check(w, r)
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, who)))
	})
}

// check returns who r is, or writes the response (401, or the redirect
// that drops ?token=) and returns ok false.
func (a *uiAuth) check(w http.ResponseWriter, r *http.Request) (who string, ok bool) {
	switch {
	case a.user != "":
		user, pass, given := r.BasicAuth()
		if given && secretEqual(user, a.user)&secretEqual(pass, a.pass) == 1 {
			return user, true
		}
		a.deny(w, r, given)
		return "", false
	case a.token != "":
		q, inQuery := r.URL.Query()["token"]
		if inQuery && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if secretEqual(q[0], a.token) != 1 {
				a.deny(w, r, true)
				return "", false
			}
			http.SetCookie(w, &http.Cookie{Name: uiTokenCookie, Value: a.token, Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			w.Header().Set("Cache-Control", "no-store")
			// Redirected so that the token leaves the address bar and
			// the history.
			http.Redirect(w, r, withoutToken(r.URL), http.StatusSeeOther)
			return "", false
		}
		if scheme, t, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "Bearer") {
			if secretEqual(strings.TrimSpace(t), a.token) == 1 {
				return "token", true
			}
			a.deny(w, r, true)
			return "", false
		}
		if c, err := r.Cookie(uiTokenCookie); err == nil {
			if secretEqual(c.Value, a.token) == 1 {
				return "token", true
			}
			a.deny(w, r, true)
			return "", false
		}
		a.deny(w, r, false)
		return "", false
	}
	return a.local, true
}

// secretEqual is 1 when a equals b, in a time that says nothing of
// either (the hashes have one length whatever the secrets' are).
func secretEqual(a, b string) int {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:])
}

// withoutToken is u's path and query without its token parameters, the
// rest in their order. A path starting "//" loses the extra slashes, so
// that the Location is not read as another host.
func withoutToken(u *url.URL) string {
	path := u.EscapedPath()
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		path = "/" + strings.TrimLeft(path, "/")
	}
	var keep []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); kv == "" || err == nil && key == "token" {
			continue
		}
		keep = append(keep, kv)
	}
	if len(keep) > 0 {
		path += "?" + strings.Join(keep, "&")
	}
	return path
}

// deny answers 401 saying how to authenticate; presented says that the
// request carried credentials, which were wrong (logged: a browser's
// first request without them is not worth a line).
func (a *uiAuth) deny(w http.ResponseWriter, r *http.Request, presented bool) {
	if presented {
		a.log.WarnContext(r.Context(), "seqbox ui: authentication failed", "remote", r.RemoteAddr, "path", r.URL.Path)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	var msg string
	if a.user != "" {
		h.Set("WWW-Authenticate", `Basic realm="seqbox", charset="UTF-8"`)
		msg = "seqbox ui: this server needs the user name and password it was started with (--basic-auth).\n"
	} else {
		h.Set("WWW-Authenticate", `Bearer realm="seqbox"`)
		msg = "seqbox ui: this server needs the token it was started with (--token).\n\n" +
			"In a browser, open this address once with ?token=<token> added; the browser keeps it in a\n" +
			"cookie. A link with the token followed from another site (a chat, an email) is not sent the\n" +
			"cookie on that first visit (SameSite=Strict): load the address again from the address bar.\n" +
			"From a script, send the header: Authorization: Bearer <token>\n"
	}
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, msg)
}
