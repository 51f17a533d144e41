"""BEAM ("Beyond a Million Tokens"): synthetic user-assistant chats at four scales with probing questions."""
