package limiterecho

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter/httplimit"
)

// Middleware returns an echo middleware that decides each request with m:
// an admitted request goes on to the next handler with the rate limit
// fields on its response header; a denied one, or one that could not be
// decided, is answered by m's handlers and the next handler is not called.
//
// m sees the request with its Pattern set to the method and echo's route
// ("POST /login", "GET /users/:id"; on a virtual host's routes, Echo.Host,
// too), as a ServeMux sets it, so that
// httplimit.Route() and WithRules(Route()) key requests by their route; a
// request routed nowhere (404, 405) as httplimit.NoRoute, whatever its
// method, which the rule set's Default decides.
func Middleware(m *httplimit.Middleware) echo.MiddlewareFunc {
	var routes routeSets
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if !routes.routed(c, route) {
				route = ""
			}
			if _, ok := m.Decide(c.Response(), withPattern(c.Request(), route)); !ok {
				return nil
			}
			return next(c)
		}
	}
}

// withPattern returns r with its Pattern set to its method and route (a
// shallow copy). The framework's route wins over a Pattern r has already:
// an http.ServeMux in front of the framework ("/" mounting the whole app)
// set one that names no route. A request routed nowhere keeps that one,
// or gets httplimit.NoRoute, without its method: the client chooses the
// method, and each would be a budget of its own.
func withPattern(r *http.Request, route string) *http.Request {
	pattern := r.Method + " " + route
	if route == "" {
		if r.Pattern != "" {
			return r
		}
		pattern = httplimit.NoRoute
	}
	r2 := r.WithContext(r.Context())
	r2.Pattern = pattern
	return r2
}

// routeSets tells, per echo router (an Echo's, or one of its virtual
// hosts', Echo.Host), which methods have a route at a path.
type routeSets struct {
	sets sync.Map // *echo.Router -> *atomic.Pointer[routeSet]
}

// routeSet is a router's routes: the methods routed at each path, read
// when the router held n routes.
type routeSet struct {
	methods map[string]map[string]bool
	n       int
}

// routed reports whether echo routed c's request to a route of its method
// at path, the route c.Path() names. echo also names a path for a request
// it answers 405 (a route at the path, for other methods), and for one
// that a 404 route registered with RouteNotFound answers (as Group.Use
// registers for the group's paths, so that the group's middleware runs):
// neither is routed. The routes are those of the router echo found the
// request's route in (the virtual host's for the request's Host, else the
// Echo's), read once, and again when a request's method and path are not
// among them and the router has more routes than were read (a route
// added later).
func (s *routeSets) routed(c echo.Context, path string) bool {
	if path == "" || c.Get(echo.ContextKeyHeaderAllow) != nil {
		return false // nowhere, or 405 (echo set the Allow header's value)
	}
	method := c.Request().Method
	if method == echo.RouteNotFound {
		return false // (the name echo gives its 404 routes, as a method)
	}
	rt := router(c.Echo(), c.Request().Host)
	v, ok := s.sets.Load(rt)
	if !ok {
		v, _ = s.sets.LoadOrStore(rt, new(atomic.Pointer[routeSet]))
	}
	p := v.(*atomic.Pointer[routeSet])
	set := p.Load()
	if set != nil && set.methods[path][method] {
		return true
	}
	routes := rt.Routes()
	if set != nil && len(routes) == set.n {
		return false // (echo has no way to remove a route)
	}
	built := &routeSet{methods: make(map[string]map[string]bool), n: len(routes)}
	for _, r := range routes {
		if built.methods[r.Path] == nil {
			built.methods[r.Path] = make(map[string]bool)
		}
		built.methods[r.Path][r.Method] = r.Method != echo.RouteNotFound
	}
	p.Store(built)
	return built.methods[path][method]
}

// router returns the router echo finds a request's route in, as
// Echo.ServeHTTP does: the virtual host's (Echo.Host) for its Host, else
// the Echo's own.
func router(e *echo.Echo, host string) *echo.Router {
	if rt, ok := e.Routers()[host]; ok {
		return rt
	}
	return e.Router()
}
