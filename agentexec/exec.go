package agentexec

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// Exec runs argv in the pod's container through the API server (RBAC:
// create pods/exec), streaming its stdout and stderr, and returns its exit
// code. err is set only when the command could not be run or its stream
// broke; a command that ran and failed is code != 0 with err nil.
//
// It speaks WebSocket first and falls back to SPDY for API servers older
// than 1.30, as kubectl exec does.
func Exec(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, container string, argv []string, stdout, stderr io.Writer) (int, error) {
	req := cs.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return 0, fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec %q in pod %s/%s container %s: %w", argv[0], pod.Namespace, pod.Name, container, err)
	}
	return 0, nil
}
