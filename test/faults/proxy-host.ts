import { controlByStdin, FaultProxy } from './fault-proxy';

/**
 * A delaying TCP proxy run as (part of) a host of the cross-host fault suite
 * (cluster-hosts.faults.spec.ts): listens on PROXY_ADDRESS:PROXY_PORT inside the host's network
 * namespace and relays to PROXY_TARGET (`host:port`). The suite points one process at it (scorer A
 * reaches Redis through it) to slow that process's link alone; commands on stdin
 * (`controlByStdin`). The process exits when stdin closes.
 */
async function main(): Promise<void> {
  const target = process.env.PROXY_TARGET;
  const address = process.env.PROXY_ADDRESS;
  const port = Number(process.env.PROXY_PORT);
  if (!target || !address || !port) throw new Error('PROXY_TARGET, PROXY_ADDRESS and PROXY_PORT are required');
  const proxy = await FaultProxy.start(`tcp://${target}`, { host: address, port });
  controlByStdin(proxy, async () => undefined);
  console.log(`proxy ready on ${address}:${port} to ${target}`);
}

main().catch((err: Error) => {
  console.error(`proxy host failed: ${err.stack ?? err.message}`);
  process.exit(1);
});
