// Package agentapi is the gRPC contract between the vpcnet CNI plugin and
// the vpcnetd agent. The .pb.go files are generated from agent.proto and
// checked in, so building needs no protoc.
package agentapi

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto
