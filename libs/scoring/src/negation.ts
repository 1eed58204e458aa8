/**
 * HEURISTIC, not a learned model: a rule-based signed weight head for Signed MaxSim, for models
 * without a `token_weights` output (SPEC section 1). Weight -1 on the scope of a negation cue,
 * +1 everywhere else (including the cue word itself).
 *
 * Cues: not, no, without, except, excluding, nor, never, none, neither, cannot, and any "n't"
 * contraction (isn't, don't, ...; also the bare "n't" / "t" piece a tokenizer splits off after
 * an apostrophe). "but not" is covered by "not".
 * Scope: from the token after the cue up to (excluding) the first scope breaker: punctuation
 * (. , ; : ! ? ( ) [ ]), a clause-level conjunction or relative word (but, however, although,
 * though, while, whereas, yet, which, who, that, because, since, and then), a special token
 * ([CLS], [SEP], [Q], [D], <s>, </s>, [PAD]), or the end. "or" / "and" stay inside the scope
 * ("not red or blue" negates both). Subword pieces ("##ing") inherit the weight of the word.
 * tokens: n strings. Returns n (float32).
 */
const CUES = new Set(['not', 'no', 'without', 'except', 'excluding', 'nor', 'never', 'none', 'neither', 'cannot', "n't", 'nt']);
const BREAKERS = new Set(['but', 'however', 'although', 'though', 'while', 'whereas', 'yet', 'which', 'who', 'that', 'because', 'since', 'then']);
const PUNCT = /^[.,;:!?()[\]{}"]+$/;
const SPECIAL = /^(\[(cls|sep|q|d|pad|unk|mask)\]|<\/?s>|<pad>)$/i;

function isCue(tok: string): boolean {
  const t = tok.toLowerCase().replace(/^##/, '').replace(/^[▁Ġ]/, '');
  return CUES.has(t) || /n['’]t$/.test(t);
}

export function negationWeights(tokens: string[]): Float32Array {
  const w = new Float32Array(tokens.length).fill(1);
  let inScope = false;
  for (let i = 0; i < tokens.length; i++) {
    const raw = tokens[i];
    const t = raw.toLowerCase().replace(/^[▁Ġ]/, '');
    if (SPECIAL.test(raw) || PUNCT.test(t) || BREAKERS.has(t)) {
      inScope = false;
      continue;
    }
    if (t.startsWith('##')) {
      if (i > 0) w[i] = w[i - 1];
      continue;
    }
    // "don ' t": the bare "t" after an apostrophe closes a contraction cue
    if (t === 't' && i > 0 && /^['’]$/.test(tokens[i - 1])) {
      inScope = true;
      continue;
    }
    if (/^['’]$/.test(t)) continue;
    if (isCue(t)) {
      inScope = true; // the cue itself keeps +1
      continue;
    }
    if (inScope) w[i] = -1;
  }
  return w;
}
