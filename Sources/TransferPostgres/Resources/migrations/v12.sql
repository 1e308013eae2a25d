-- v12: inactive accounts (contract v1.2, "Inactive accounts").
--
-- An app backend protects an account that holds something of value (a purchase): the
-- pruner never erases a protected account as inactive. NULL: not protected.
ALTER TABLE accounts ADD COLUMN protected_at BIGINT;
