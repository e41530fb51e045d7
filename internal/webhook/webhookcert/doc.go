// Package webhookcert lets `gpupack webhook` manage and rotate its own TLS
// certificate when cert-manager is absent. It owns the certificate
// material of a Kubernetes Secret shared by every replica of the webhook,
// and the caBundle of the MutatingWebhookConfiguration that sends the
// webhook its pods.
//
// The pure part (Policy.Reconcile) decides, given the Secret's data and a
// clock, what the Secret must hold: a CA (ECDSA P-256, ten years) and a
// serving certificate it signs for the webhook's DNS names and IP
// addresses; each renewed once two thirds of its validity have passed, a
// replaced CA kept in the bundle while a certificate it signed may still be
// served. The Manager applies the decision with client-go: it reads the
// Secret, writes it back with its resourceVersion (on a conflict it reads
// the other replica's certificate and uses it), sets clientConfig.caBundle
// of each webhook of the configuration (a JSON patch that touches nothing
// else), serves the Secret's certificate from memory, and rereads the
// Secret every 30 seconds and when a renewal is due, so that a rotation
// done by another replica is picked up.
//
// The Secret (e.g. gpupack-system/gpupack-webhook-tls, type
// kubernetes.io/tls, possibly with empty tls.crt and tls.key) must exist:
// the Helm chart creates it; the webhook never creates one. The RBAC it
// needs, and no more:
//
//	# Role in the Secret's namespace
//	- apiGroups: [""]
//	  resources: [secrets]
//	  resourceNames: [gpupack-webhook-tls]
//	  verbs: [get, update]
//	# ClusterRole
//	- apiGroups: [admissionregistration.k8s.io]
//	  resources: [mutatingwebhookconfigurations]
//	  resourceNames: [gpupack]
//	  verbs: [get, patch]
//
// The package never logs private keys. It does not import cobra.
package webhookcert
