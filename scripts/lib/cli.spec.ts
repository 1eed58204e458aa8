import { describe, expect, it } from 'vitest';
import { CliUsageError, intFlag, intListFlag, parseCli } from './cli';
import { parseArgs as parseArtifactArgs } from '../write-scorer-artifact';
import { runKeysCli } from './keys-cli';

describe('scripts command lines (node:util parseArgs, strict)', () => {
  const options = { out: { type: 'string' }, quiet: { type: 'boolean' } } as const;

  it('parses flags, --flag=value and -h, and refuses unknown flags, missing values and stray positionals', () => {
    expect(parseCli(['--out', 'x', '--quiet'], options).values).toEqual({ out: 'x', quiet: true });
    expect(parseCli(['--out=y'], options).values).toEqual({ out: 'y' });
    expect(parseCli(['-h'], options).values).toEqual({ help: true });
    expect(() => parseCli(['--outt', 'x'], options)).toThrow(CliUsageError);
    expect(() => parseCli(['--outt', 'x'], options)).toThrow(/Unknown option '--outt'/);
    expect(() => parseCli(['--out'], options)).toThrow(/argument missing/);
    expect(() => parseCli(['extra'], options)).toThrow(CliUsageError);
    expect(parseCli(['cmd', 'id', '--quiet'], options, { positionals: true }).positionals).toEqual(['cmd', 'id']);
  });

  it('passes a negative number to a string flag, for the script to refuse with its own message', () => {
    expect(parseCli(['--out', '-3'], options).values.out).toBe('-3');
    expect(() => intFlag('out', '-3')).toThrow('--out must be a whole number of at least 1, got "-3"');
    expect(() => parseCli(['--out', '-x'], options)).toThrow(/ambiguous/);
  });

  it('intListFlag: a comma list of whole numbers, anything else refused naming the flag', () => {
    expect(intListFlag('nprobes', '4, 8,32')).toEqual([4, 8, 32]);
    expect(() => intListFlag('nprobes', '')).toThrow('--nprobes must be a comma list of whole numbers of at least 1, got ""');
    expect(() => intListFlag('nprobes', '8,0')).toThrow('--nprobes must be a comma list of whole numbers of at least 1, got "8,0"');
    expect(() => intListFlag('tprimes', '500,1e3.5')).toThrow(CliUsageError);
  });

  it('write-scorer-artifact: the same artifacts as before, and bad lines refused', () => {
    expect(parseArtifactArgs(['lite', '--out', 'a.onnx', '--size', 'small', '--L2', '64'])).toEqual({ kind: 'lite', out: 'a.onnx', sizes: { L1: 30, L2: 64, m1: 360, m2: 768 } });
    expect(parseArtifactArgs(['knrm', '--out', 'k.onnx', '--seed', '3'])).toEqual({ kind: 'knrm', out: 'k.onnx', seed: 3 });
    expect(parseArtifactArgs(['--help']).help).toBe(true);
    expect(() => parseArtifactArgs(['lite'])).toThrow('--out FILE is required');
    expect(() => parseArtifactArgs(['bert', '--out', 'x'])).toThrow(/lite or knrm/);
    expect(() => parseArtifactArgs(['lite', '--out', 'x', '--size', 'huge'])).toThrow(/--size must be default or small/);
    expect(() => parseArtifactArgs(['lite', '--out', 'x', '--m1', '0'])).toThrow(/--m1 must be a whole number/);
  });

  it('npm run keys refuses an option it does not know (it used to ignore it)', async () => {
    await expect(runKeysCli(['list', '--tenantt', 'acme'], {} as never, () => undefined)).rejects.toThrow(/Unknown option '--tenantt'/);
  });
});
