"""Kubernetes pod context: status, events and logs of the pods behind a card's repository
(source.py), judged by pods.py, failures classified by errors.py."""

from __future__ import annotations

from cardloop.integrations.sources.kubernetes.pods import PodSelector
from cardloop.integrations.sources.kubernetes.source import NAME, KubernetesSource

__all__ = ["NAME", "KubernetesSource", "PodSelector"]
