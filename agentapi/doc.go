// Package agentapi is the contract between the vpcnet CNI plugin and the
// vpcnetd agent, served over a root-only unix socket: the messages, a
// client and a server.
//
// The wire is one call per connection: the client writes one JSON object,
// {"method": "Add", "body": {...}}, and the server answers with one,
// {"body": {...}} or {"error": {"code": ..., "message": ...}}, and closes.
// A plugin process makes one or two calls in its life, so a connection per
// call costs nothing, and a plain protocol on encoding/json keeps the
// plugin's start (exec, runtime and package initialisation, half of a warm
// ADD) and the agent's binary small: gRPC's packages took about a third of
// the plugin's package initialisation, and one of them (golang.org/x/net/trace,
// through html/template) made the linker keep every exported method of
// every type in vpcnetd, all 812 EC2 SDK operations among them.
//
// A call's context ends on the server when the client hangs up, so an Add
// waiting for the pool to grow stops when the plugin gives up.
package agentapi
