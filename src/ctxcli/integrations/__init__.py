"""Optional integrations (extras): agent frameworks, the proxy, Ray Data, Hugging Face datasets.

They import the library; the library never imports them.
"""
