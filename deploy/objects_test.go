package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// object is one document of a manifest stream.
type object struct {
	id  string         // "Kind namespace/name"
	raw map[string]any // as written, for semantic comparison
	doc []byte
}

// decodeObjects splits a multi-document YAML stream, skipping documents
// that hold only comments.
func decodeObjects(data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var raw map[string]any
		if err := yaml.Unmarshal(doc, &raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		if raw == nil {
			continue
		}
		var meta struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		id := meta.Kind + " " + meta.Name
		if meta.Namespace != "" {
			id = meta.Kind + " " + meta.Namespace + "/" + meta.Name
		}
		out = append(out, object{id: id, raw: raw, doc: doc})
	}
}

// manifestSet is vpcnet's objects, decoded into the API's own types.
type manifestSet struct {
	crd     *apiextv1.CustomResourceDefinition
	sa      *corev1.ServiceAccount
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
	ds      *appsv1.DaemonSet
	// operator is the ClusterRole of `kubectl vpcnet` (agentexec).
	operator *rbacv1.ClusterRole
	// The budget controller and the agent's read of its Lease: all nil
	// when the chart's budget.enabled is false.
	budget budgetSet
}

// budgetSet is the budget controller's objects, and the agent's Role to
// read its Lease.
type budgetSet struct {
	agentRole    *rbacv1.Role
	agentBinding *rbacv1.RoleBinding
	sa           *corev1.ServiceAccount
	role         *rbacv1.Role
	roleBinding  *rbacv1.RoleBinding
	clusterRole  *rbacv1.ClusterRole
	crBinding    *rbacv1.ClusterRoleBinding
	deploy       *appsv1.Deployment
}

// any says some of the objects are there; complete, all of them.
func (b budgetSet) any() bool {
	return b.agentRole != nil || b.agentBinding != nil || b.sa != nil || b.role != nil || b.roleBinding != nil ||
		b.clusterRole != nil || b.crBinding != nil || b.deploy != nil
}

func (b budgetSet) complete() bool {
	return b.agentRole != nil && b.agentBinding != nil && b.sa != nil && b.role != nil && b.roleBinding != nil &&
		b.clusterRole != nil && b.crBinding != nil && b.deploy != nil
}

// budgetName is the budget controller's objects' name.
const budgetName = "vpcnet-budget"

// typed decodes each object strictly: a misspelt or misplaced field, which
// the API server would drop or refuse, is an error here.
func typed(objs []object) (manifestSet, error) {
	var m manifestSet
	for _, o := range objs {
		var target any
		var seen bool
		name := o.raw["metadata"].(map[string]any)["name"]
		b := &m.budget
		switch kind := o.raw["kind"]; {
		case kind == "ServiceAccount" && name == budgetName:
			seen, b.sa = b.sa != nil, &corev1.ServiceAccount{}
			target = b.sa
		case kind == "ClusterRole" && name == budgetName:
			seen, b.clusterRole = b.clusterRole != nil, &rbacv1.ClusterRole{}
			target = b.clusterRole
		case kind == "ClusterRoleBinding" && name == budgetName:
			seen, b.crBinding = b.crBinding != nil, &rbacv1.ClusterRoleBinding{}
			target = b.crBinding
		case kind == "Role" && name == budgetName:
			seen, b.role = b.role != nil, &rbacv1.Role{}
			target = b.role
		case kind == "RoleBinding" && name == budgetName:
			seen, b.roleBinding = b.roleBinding != nil, &rbacv1.RoleBinding{}
			target = b.roleBinding
		case kind == "Role":
			seen, b.agentRole = b.agentRole != nil, &rbacv1.Role{}
			target = b.agentRole
		case kind == "RoleBinding":
			seen, b.agentBinding = b.agentBinding != nil, &rbacv1.RoleBinding{}
			target = b.agentBinding
		case kind == "Deployment" && name == budgetName:
			seen, b.deploy = b.deploy != nil, &appsv1.Deployment{}
			target = b.deploy
		}
		switch kind := o.raw["kind"]; {
		case target != nil:
		case kind == "CustomResourceDefinition":
			seen, m.crd = m.crd != nil, &apiextv1.CustomResourceDefinition{}
			target = m.crd
		case kind == "ServiceAccount":
			seen, m.sa = m.sa != nil, &corev1.ServiceAccount{}
			target = m.sa
		case kind == "ClusterRole":
			if o.raw["metadata"].(map[string]any)["name"] == "vpcnet-operator" {
				seen, m.operator = m.operator != nil, &rbacv1.ClusterRole{}
				target = m.operator
				break
			}
			seen, m.role = m.role != nil, &rbacv1.ClusterRole{}
			target = m.role
		case kind == "ClusterRoleBinding":
			seen, m.binding = m.binding != nil, &rbacv1.ClusterRoleBinding{}
			target = m.binding
		case kind == "DaemonSet":
			seen, m.ds = m.ds != nil, &appsv1.DaemonSet{}
			target = m.ds
		default:
			return m, fmt.Errorf("%s: unexpected object; vpcnet installs one CRD, ServiceAccount, ClusterRole, ClusterRoleBinding and DaemonSet, the ClusterRole vpcnet-operator, and the budget controller (a Deployment, its ServiceAccount, Role, ClusterRole and bindings, and the agent's Role to read its Lease)", o.id)
		}
		if seen {
			return m, fmt.Errorf("%s: a second %v", o.id, o.raw["kind"])
		}
		if err := yaml.UnmarshalStrict(o.doc, target); err != nil {
			return m, fmt.Errorf("%s: %w", o.id, err)
		}
	}
	if m.crd == nil || m.sa == nil || m.role == nil || m.binding == nil || m.ds == nil || m.operator == nil {
		return m, errors.New("missing objects: vpcnet installs one CRD, ServiceAccount, ClusterRole, ClusterRoleBinding and DaemonSet, and the ClusterRole vpcnet-operator")
	}
	if m.budget.any() && !m.budget.complete() {
		return m, fmt.Errorf("the budget controller's objects are incomplete (%+v): a Deployment, ServiceAccount, Role, RoleBinding, ClusterRole and ClusterRoleBinding named vpcnet-budget, and the agent's Role and RoleBinding, or none of them", m.budget)
	}
	return m, nil
}

// container returns the pod template's container or init container named
// name.
func (m manifestSet) container(name string) *corev1.Container {
	spec := &m.ds.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// hostPathOf returns the host path behind the volume a mount names, or ""
// when it is not a hostPath volume.
func (m manifestSet) hostPathOf(mount corev1.VolumeMount) string {
	for _, v := range m.ds.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}
