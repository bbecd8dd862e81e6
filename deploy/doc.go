// Package deploy holds the tests of the deployment manifests (k8s/): each
// object decodes strictly into the Kubernetes API types, and what each
// container runs is configs/prod.yaml but for addresses. It is a module of
// its own so that k8s.io/api stays out of the product's go.mod; make test
// and CI run it (cd deploy && go test ./...).
package deploy
