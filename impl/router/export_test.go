package router

// DefaultProxyClient is the Proxy's Client when it has none, for tests.
var DefaultProxyClient = defaultClient
