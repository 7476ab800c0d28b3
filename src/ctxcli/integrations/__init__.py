"""Optional integrations (extras): Ray Data, Hugging Face datasets. The library never imports them."""
