import { describe, expect, it } from 'vitest';
import { callbackRefusal, parseAllowedHosts, signWebhook, specialAddress, verifyWebhookSignature } from './webhooks';

describe('webhook allow-list (WEBHOOK_ALLOWED_HOSTS)', () => {
  it('parses host, host:port, wildcard and bracketed IPv6 entries', () => {
    expect(parseAllowedHosts(' hooks.example.com , *.corp.example:8443,[::1]:9000, * ,')).toEqual([
      { host: 'hooks.example.com', port: null, wildcard: false },
      { host: '*.corp.example', port: 8443, wildcard: true },
      { host: '::1', port: 9000, wildcard: false },
      { host: '*', port: null, wildcard: true },
    ]);
  });

  it('empty = disabled; hosts and ports must match a pattern', () => {
    expect(callbackRefusal('https://hooks.example.com/x', '')).toMatch(/disabled: WEBHOOK_ALLOWED_HOSTS is empty/);
    expect(callbackRefusal('https://hooks.example.com/x', 'hooks.example.com')).toBeNull();
    expect(callbackRefusal('https://HOOKS.example.com:443/x', 'hooks.example.com:443')).toBeNull();
    expect(callbackRefusal('https://hooks.example.com:8443/x', 'hooks.example.com:443')).toMatch(/not in WEBHOOK_ALLOWED_HOSTS/);
    expect(callbackRefusal('https://a.corp.example:8443/x', '*.corp.example:8443')).toBeNull();
    expect(callbackRefusal('https://corp.example:8443/x', '*.corp.example:8443')).toMatch(/not in WEBHOOK_ALLOWED_HOSTS/);
    expect(callbackRefusal('https://evilcorp.example/x', '*.corp.example')).toMatch(/not in WEBHOOK_ALLOWED_HOSTS/);
    expect(callbackRefusal('https://other.example/x', 'hooks.example.com')).toMatch(/host other.example is not in WEBHOOK_ALLOWED_HOSTS/);
  });

  it('loopback, link-local and metadata addresses: refused under a wildcard, allowed only when named exactly', () => {
    for (const url of ['http://127.0.0.1/x', 'http://localhost/x', 'http://[::1]/x', 'http://169.254.169.254/latest', 'http://169.254.1.2/x', 'http://[fe80::1]/x', 'http://[fd00:ec2::254]/x', 'http://[::ffff:127.0.0.1]/x', 'http://metadata.google.internal/x', 'http://0.0.0.0/x']) {
      expect(callbackRefusal(url, '*'), url).toMatch(/loopback|link-local|metadata|unspecified/);
    }
    expect(callbackRefusal('http://127.0.0.1:9000/x', '127.0.0.1:9000')).toBeNull();
    expect(callbackRefusal('http://localhost:9000/x', 'localhost')).toBeNull();
    expect(callbackRefusal('http://169.254.169.254/x', '169.254.169.254')).toBeNull();
    expect(callbackRefusal('http://[fe80::1]/x', '[fe80::1]')).toBeNull();
  });

  it('at delivery, a name resolving to a special address is refused unless the entry names that special host', () => {
    expect(callbackRefusal('https://hooks.example.com/x', 'hooks.example.com', '93.184.216.34')).toBeNull();
    expect(callbackRefusal('https://hooks.example.com/x', 'hooks.example.com', '169.254.169.254')).toMatch(/resolves to 169.254.169.254, a metadata address/);
    expect(callbackRefusal('https://hooks.example.com/x', '*', '127.0.0.1')).toMatch(/a loopback address/);
    expect(callbackRefusal('https://hooks.example.com/x', '*', 'fe80::abcd')).toMatch(/a link-local address/);
    expect(callbackRefusal('http://localhost/x', 'localhost', '::1')).toBeNull();
  });

  it('classifies addresses', () => {
    expect(specialAddress('10.0.0.1')).toBeNull();
    expect(specialAddress('2001:db8::1')).toBeNull();
    expect(specialAddress('127.9.9.9')).toBe('loopback');
    expect(specialAddress('::ffff:a9fe:a9fe')).toBe('metadata');
    expect(specialAddress('febf::1')).toBe('link-local');
    expect(specialAddress('fec0::1')).toBeNull();
  });
});

describe('webhook signature', () => {
  it('is t=<unix>,v1=<HMAC-SHA256 hex of "<t>.<body>">, verified with the same secret only', () => {
    const body = '{"a":1}';
    const header = signWebhook('s3cret', body, 1700000000);
    // Reference value computed with openssl: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac s3cret
    expect(header).toBe('t=1700000000,v1=1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e098940');
    expect(verifyWebhookSignature('s3cret', body, header)).toBe(true);
    expect(verifyWebhookSignature('other', body, header)).toBe(false);
    expect(verifyWebhookSignature('s3cret', '{"a":2}', header)).toBe(false);
    expect(verifyWebhookSignature('s3cret', body, header.replace('t=1700000000', 't=1700000001'))).toBe(false);
  });
});
