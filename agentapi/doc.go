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
// ADD) and the agent's binary small. With gRPC the plugin ran 158 package
// initialisers (55 without), gRPC's and protobuf's a third to a half of
// their time, and was 17 MB (6 MB without); and one of gRPC's imports,
// golang.org/x/net/trace, reaches html/template, whose evaluator calls
// reflect's MethodByName with a computed name, so the linker kept every
// exported method of every type in vpcnetd, all 812 EC2 SDK operations
// among them (go build -ldflags=-dumpdep shows such functions marked
// <ReflectMethod>).
//
// A call's context ends on the server when the client hangs up, so an Add
// waiting for the pool to grow stops when the plugin gives up.
package agentapi
