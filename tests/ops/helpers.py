"""Scraping Prometheus text, free ports."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from dashboard.state import state_of


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` from the exposition format."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def scrape_app(app, **headers):
    """GET ``/metrics`` from ``app`` past its cache (which would keep an earlier test's figures)."""
    state_of(app).metrics.clear()
    return app.test_client().get("/metrics", headers=headers)


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return parse(response.read().decode())
