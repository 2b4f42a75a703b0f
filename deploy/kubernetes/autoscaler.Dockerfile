# The autoscaler's image (40-autoscaler.yaml): the orrery image (docker/Dockerfile) with
# Debian's kubectl, which the `command` provider runs. From the repository root:
#
#   docker build -f docker/Dockerfile -t orrery .
#   docker build -f deploy/kubernetes/autoscaler.Dockerfile -t orrery-autoscaler .
#
# Debian 12's kubernetes-client is kubectl 1.20; kubectl supports servers one minor
# version apart, so against a newer cluster copy a matching kubectl into the image instead.
FROM orrery:latest
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends kubernetes-client \
 && rm -rf /var/lib/apt/lists/*
