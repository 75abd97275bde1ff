-- Billing from the bill (issue 19): FOCUS 1.0-1.2 line items, as exported by the clouds.
-- Each file lands whole or not at all (one transaction); a file already ingested (same SHA-256)
-- changes nothing. A later delivery of the same export (same export name) for the same billing
-- account and period replaces that earlier delivery's rows for that period (a restatement);
-- rows with ChargeClass = 'Correction' are kept as they are (deltas to earlier periods, per FOCUS).

CREATE TABLE IF NOT EXISTS billing_files (
    file_sha256        VARCHAR PRIMARY KEY,
    export_name        VARCHAR NOT NULL,      -- the file name unless --export-name says otherwise
    path               VARCHAR NOT NULL,
    line_items         BIGINT NOT NULL,
    absent_columns     VARCHAR,               -- FOCUS columns the file did not have (JSON list)
    extra_columns      VARCHAR,               -- columns kept in line items' `extra` (JSON list)
    currency_assumed   BIGINT NOT NULL,       -- rows without BillingCurrency, taken as USD
    ingested_at        TIMESTAMP NOT NULL,
    replaced_by        VARCHAR                -- sha256 of the delivery that restated this one
);

CREATE TABLE IF NOT EXISTS billing_line_items (
    file_sha256                              VARCHAR NOT NULL,
    source_row                               BIGINT NOT NULL,
    availability_zone                        VARCHAR,
    billed_cost                              DOUBLE,
    billing_account_id                       VARCHAR,
    billing_account_name                     VARCHAR,
    billing_account_type                     VARCHAR,
    billing_currency                         VARCHAR,
    billing_period_end                       TIMESTAMP,
    billing_period_start                     TIMESTAMP,
    capacity_reservation_id                  VARCHAR,
    capacity_reservation_status              VARCHAR,
    charge_category                          VARCHAR,
    charge_class                             VARCHAR,
    charge_description                       VARCHAR,
    charge_frequency                         VARCHAR,
    charge_period_end                        TIMESTAMP,
    charge_period_start                      TIMESTAMP,
    commitment_discount_category             VARCHAR,
    commitment_discount_id                   VARCHAR,
    commitment_discount_name                 VARCHAR,
    commitment_discount_quantity             DOUBLE,
    commitment_discount_status               VARCHAR,
    commitment_discount_type                 VARCHAR,
    commitment_discount_unit                 VARCHAR,
    consumed_quantity                        DOUBLE,
    consumed_unit                            VARCHAR,
    contracted_cost                          DOUBLE,
    contracted_unit_price                    DOUBLE,
    effective_cost                           DOUBLE,
    invoice_id                               VARCHAR,
    invoice_issuer_name                      VARCHAR,
    list_cost                                DOUBLE,
    list_unit_price                          DOUBLE,
    pricing_category                         VARCHAR,
    pricing_currency                         VARCHAR,
    pricing_currency_contracted_unit_price   DOUBLE,
    pricing_currency_effective_cost          DOUBLE,
    pricing_currency_list_unit_price         DOUBLE,
    pricing_quantity                         DOUBLE,
    pricing_unit                             VARCHAR,
    provider_name                            VARCHAR,
    publisher_name                           VARCHAR,
    region_id                                VARCHAR,
    region_name                              VARCHAR,
    resource_id                              VARCHAR,
    resource_name                            VARCHAR,
    resource_type                            VARCHAR,
    service_category                         VARCHAR,
    service_name                             VARCHAR,
    service_subcategory                      VARCHAR,
    sku_id                                   VARCHAR,
    sku_meter                                VARCHAR,
    sku_price_details                        VARCHAR,
    sku_price_id                             VARCHAR,
    sub_account_id                           VARCHAR,
    sub_account_name                         VARCHAR,
    sub_account_type                         VARCHAR,
    tags                                     VARCHAR,
    currency_assumed                         BOOLEAN NOT NULL,
    extra                                    VARCHAR,
    PRIMARY KEY (file_sha256, source_row)
);
