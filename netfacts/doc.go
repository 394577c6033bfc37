// Package netfacts holds the facts the plugin and the agent must agree
// on, computed once: the route table of an ENI, the gateway of a subnet,
// the host veth name of a pod, and the rules an attachment key and a pod
// identity must follow. When two binaries derive one fact with two copies
// of the rule, a change to one copy breaks live pods silently (a veth the
// agent cannot find, a table the plugin never fills); here there is one
// copy.
//
// The package is pure: no files, sockets, clock or kernel (a test checks
// its imports), so both sides and their tests can call it freely.
package netfacts
