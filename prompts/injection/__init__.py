"""Prompt-injection detection for tenant prompts, the layers after validate.py's phrase patterns:

    normalize.py   the classifier's view of a text: disguises undone, hidden payloads decoded
    classifier.py  hashed n-gram logistic regression, weights in model.json (offline, pure Python)
    guard.py       the optional guard model's question and the parsing of its verdict

Trained and measured by bench/injection_train.py and bench/injection.py (see README, "Tenant
prompts")."""
