"""Fake secrets, one per redactor family, shared by the redaction tests (never real keys: each
is split so no scanner takes this file for a leak)."""

from __future__ import annotations

ANTHROPIC = "sk-ant-" + "api03-" + "Xq3vB8nR2mK7pL4wT9yH1cF6dJ0sA5gE" * 2 + "Zr8Tu3Wq2Lk7Vb-AAAA"
OPENAI_PROJECT = "sk-" + "proj-" + "Ab3dEf5GhIj7KlMn9OpQr1StUvWx3YzAb5CdEf7GhIj9KlMn1OpQr_T3BlbkFJ"
OPENAI_LEGACY = "sk-" + "Zx7Yw6Vu5Ts4Rq3Po2NmT3BlbkFJ1Lk2Ji3Hg4Fe5Dc6Ba7"
GITHUB_BODY = "1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU"
GITHUB_PAT = ("github_" + "pat_" + "11ABCDEFG0aBcDeFgHiJkL_"
              + "mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567")
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_KEY_ID = "ASIA" + "ZXCVBNMQWERTY123"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUgRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SLACK_BODY = "-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_WEBHOOK = ("https://hooks." + "slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/"
                 + "aBcDeFgHiJkLmNoPqRsTuVwX")
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
STRIPE_LIVE = "sk_" + "live_" + "51H8xYzAbCdEfGhIjKlMnOpQr2StUvWx3Yz"
STRIPE_RESTRICTED = "rk_" + "live_" + "51H8xYzAbCdEfGhIjKlMnOpQr2StUvWx3Yz"
PEM_BODY = (
    "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi3m7ZbGk5y+Hq8VtBw2sY1Vt0Hk\n"
    "Qm7X8cP0aZ3yN6uF4jB2vR9sLw1tE5oK8dH3gJ7fA0qW2xC4bV6nM9zS1pL3kT5o\n"
    "Yr2Wq8Es6Df4Gh0Jk2Lz4Xc6Vb8Nm0Qa1Ws3Ed5Rf7Tg9Yh1Uj3Ik5Ol7Pz9Ax==\n"
)
