"""Webhook delivery to merchant endpoints."""
