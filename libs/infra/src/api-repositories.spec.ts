import { describe, expect, it } from 'vitest';
import { pickRepositories, type ApiRepositories } from './api-repositories';

describe('pickRepositories', () => {
  it('hands a service the repositories its list names, the same objects, and no other member', () => {
    const member = (name: string) => ({ name });
    const repos = Object.fromEntries(['config', 'logger', 'store', 'queues', 'collections', 'generations', 'jobs', 'flows'].map((k) => [k, member(k)])) as unknown as ApiRepositories;
    const picked = pickRepositories(repos, ['store', 'queues', 'jobs']);
    expect(Object.keys(picked).sort()).toEqual(['jobs', 'queues', 'store']);
    expect(picked.store).toBe(repos.store);
    expect(picked.jobs).toBe(repos.jobs);
    expect('collections' in picked).toBe(false);
    expect('config' in picked).toBe(false);
  });
});
