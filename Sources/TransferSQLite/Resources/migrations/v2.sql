-- v2: accounts.transfer_id said "transfer" but held a device UUID: the device the account
-- was last moved to. The API field stays `transferId`.
ALTER TABLE accounts RENAME COLUMN transfer_id TO moved_to_device_id;
