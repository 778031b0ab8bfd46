// Package derive lets the module's own strategies tell the Limiter that
// their Decide names its Redis keys from limiter.Request.AppendKey and never
// reads Request.Keys, so the Limiter may leave Keys unbuilt on its
// decision path: a decision then allocates one key per limit (the
// strategy's, with the window after the limiter's key) instead of two.
//
// The marker's method takes a type only this module can name, so a
// strategy written outside it cannot declare it, and returns the strategy
// it belongs to, so that a type embedding one of the module's strategies
// does not inherit it: every strategy written outside the module gets
// Keys built, as the Strategy contract promises.
//
// Call is the form in which such a strategy hands Limiter.AllowMany the
// script calls of a batch it decides in rounds (AlignedWindow, whose call
// is made again when the app's clock named another window than the
// server's).
package derive
