# The names lmspec looks for are the book's; mine differ in three places.
from my_gpt import *  # noqa: F403
from my_gpt import CausalSelfAttention as MultiHeadAttention  # noqa: F401
from my_gpt import TinyGPT as GPTModel  # noqa: F401
from my_gpt import sample_tokens as generate  # noqa: F401
