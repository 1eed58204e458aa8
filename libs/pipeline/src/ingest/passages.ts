/** A passage of a long document: a UTF-16 character range of its text. */
export interface PassageWindow {
  start: number;
  end: number;
}

/**
 * Cuts `text` into passages of at most `room` content tokens, consecutive passages sharing about
 * `overlap` tokens, on whitespace boundaries so that every passage is a slice of the text.
 * `count` gives the content tokens of a string (no special tokens). A word is counted alone
 * first; each window is then checked as a whole (a tokenizer may count a word differently in
 * context) and shrunk word by word until it fits. A single word longer than `room` is a passage
 * of its own (the encoder truncates it). Pure: the same text always gives the same windows.
 */
export function splitPassages(text: string, count: (s: string) => number, room: number, overlap: number): PassageWindow[] {
  if (!(room >= 1)) throw new RangeError(`passage room must be >= 1 token, got ${room}`);
  if (!(overlap >= 0) || overlap * 2 > room) throw new RangeError(`passage overlap must be between 0 and half the room (${room}), got ${overlap}`);
  const words: { start: number; end: number }[] = [];
  for (const m of text.matchAll(/\S+/g)) words.push({ start: m.index, end: m.index + m[0].length });
  if (words.length === 0) return [];
  const memo = new Map<string, number>();
  const tokens = words.map((w) => {
    const s = text.slice(w.start, w.end);
    let n = memo.get(s);
    if (n === undefined) memo.set(s, (n = count(s)));
    return n;
  });
  const out: PassageWindow[] = [];
  let s = 0;
  for (;;) {
    let e = s;
    let sum = 0;
    while (e < words.length && (e === s || sum + tokens[e] <= room)) sum += tokens[e++];
    while (e - s > 1 && count(text.slice(words[s].start, words[e - 1].end)) > room) e--;
    out.push({ start: words[s].start, end: words[e - 1].end });
    if (e >= words.length) return out;
    // the next passage starts `overlap` tokens (whole words) before this one's end, always after its start
    let j = e;
    let shared = 0;
    while (j - 1 > s && shared + tokens[j - 1] <= overlap) shared += tokens[--j];
    s = j;
  }
}
