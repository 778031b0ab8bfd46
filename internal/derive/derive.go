package derive

// Token is the argument of KeyDeriver's method.
type Token struct{}

// KeyDeriver is implemented by strategies whose Decide reads the request's
// keys only through limiter.Request.AppendKey.
type KeyDeriver interface {
	DerivesKeys(Token)
}
