package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig says how to reach the API server: the kubeconfig file when
// one is given (VPCNET_KUBECONFIG), else the pod's service account when
// KUBERNETES_SERVICE_HOST is set, else nil: no Kubernetes, as in the local
// cloud. source describes the choice for /v1/status.
func RESTConfig(kubeconfig string, lookup func(string) (string, bool)) (rc *rest.Config, source string, err error) {
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, "", fmt.Errorf("VPCNET_KUBECONFIG=%s: %w", kubeconfig, err)
		}
		return rc, "kubeconfig " + kubeconfig, nil
	}
	if host, ok := lookup("KUBERNETES_SERVICE_HOST"); ok && host != "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster Kubernetes config (KUBERNETES_SERVICE_HOST=%s): %w", host, err)
		}
		return rc, "in-cluster service account", nil
	}
	return nil, "", nil
}
