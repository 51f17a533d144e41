"""LongMemEval (Wu et al., ICLR 2025): one conversation per question, its haystack of dated chat sessions."""
