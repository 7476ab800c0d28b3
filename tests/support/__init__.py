"""Helpers the tests share: fake model APIs (``fake_api``) and the real agent CLIs (``clients``)."""
