/**
 * Finds a dataset's files by name pattern, so an evaluation reads any folder laid out in its
 * dataset's format (TREC DL 2019, 2020, ... name their files after the year) instead of one
 * hard-coded file name.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface FilePattern {
  /** Matched against file names (not paths). */
  pattern: RegExp;
  /** The pattern as a user reads it in an error, e.g. `qrels*.txt`. */
  glob: string;
  /** What the file holds, for the error message. */
  description: string;
}

/** Thrown when a folder has no file, or more than one file, for some pattern. */
export class DatasetFilesError extends Error {
  override name = 'DatasetFilesError';
}

/**
 * One file per role: `patterns` maps a role (run, qrels, ...) to its pattern. `chosen` names a
 * role's file explicitly (a file name inside `dir`, or a path), skipping the search for that role.
 * Returns absolute-or-as-given paths `join(dir, name)`.
 *
 * Throws DatasetFilesError naming the folder, the pattern and what the folder holds when a role
 * matches no file or several files (then it lists them: pick one with `chosen`).
 */
export function findDatasetFiles<R extends string>(
  dir: string,
  patterns: Record<R, FilePattern>,
  chosen: Partial<Record<R, string | undefined>> = {},
): Record<R, string> {
  let entries: string[];
  try {
    if (!statSync(dir).isDirectory()) throw new DatasetFilesError(`${dir} is not a folder`);
    entries = readdirSync(dir).filter((name) => statSync(join(dir, name)).isFile()).sort();
  } catch (err) {
    if (err instanceof DatasetFilesError) throw err;
    throw new DatasetFilesError(`dataset folder ${dir} cannot be read (${(err as Error).message})`);
  }
  const roles = Object.keys(patterns) as R[];
  const expected = roles.map((r) => `${patterns[r].glob} (${patterns[r].description})`).join(', ');
  const found = entries.length ? entries.join(', ') : 'nothing';
  const out = {} as Record<R, string>;
  for (const role of roles) {
    const given = chosen[role];
    if (given) {
      out[role] = given.includes('/') ? given : join(dir, given);
      continue;
    }
    const { pattern, glob } = patterns[role];
    const matches = entries.filter((name) => pattern.test(name));
    if (matches.length === 0) {
      throw new DatasetFilesError(`${dir}: no file matches ${glob} for the ${role}; this format needs ${expected}; the folder holds ${found}`);
    }
    if (matches.length > 1) {
      throw new DatasetFilesError(`${dir}: ${matches.length} files match ${glob} for the ${role} (${matches.join(', ')}); name one with --${role} FILE`);
    }
    out[role] = join(dir, matches[0]!);
  }
  return out;
}
